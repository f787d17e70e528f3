"""Compiled multi-step loops and the host side that drives them."""

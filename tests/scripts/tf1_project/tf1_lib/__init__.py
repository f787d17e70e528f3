"""Helper package of the TF1 fixture script; its modules must see the TF1 API too."""

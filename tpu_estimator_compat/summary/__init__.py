"""Events on the host: training and eval summaries, progress lines, host work threads."""

"""Legacy names served to unchanged scripts: aliases, import hook, TF1 mode."""

"""Reading and writing files safely: atomic publication (`atomic`), regular-file reads with
caps (`fileio`), and the capped JSON/TOML decoder (`decoding`)."""

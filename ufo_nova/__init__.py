"""ufo_nova: Nova scheduler plugins fed by ufo-agent host signals."""

"""UFO guest/host shared-page channel (paper section 4.6)."""

"""Reports built from decoded buffers: the profile, its page, the Arm proposal's values."""

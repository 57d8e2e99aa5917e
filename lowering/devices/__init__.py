"""Running lowered code: the harness, what a device is, the cpu and nvptx devices and their workers."""

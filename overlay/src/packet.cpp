// placeholder, replaced by the packet implementation

// placeholder, replaced by the esp implementation

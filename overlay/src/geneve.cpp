// placeholder, replaced by the geneve implementation

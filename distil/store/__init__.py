"""Ground: the content-addressed artifact store and its administration."""

"""Paper tables as data: presets, their cells (content-keyed runs), and their rendering."""

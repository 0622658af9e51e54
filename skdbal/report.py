"""Tables and figures from a grid's results.csv (placeholder; filled below)."""

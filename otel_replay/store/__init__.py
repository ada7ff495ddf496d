"""Store: content-addressed, compressed, deduplicated fixtures with an SQLite index."""

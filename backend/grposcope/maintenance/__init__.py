"""maintenance domain: the points table's partitions (create ahead, retire old ones)."""

"""sdsl."""

"""zcomm: zero-copy communication for distributed deep learning (Python package)."""

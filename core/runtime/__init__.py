"""GPU runtime behind a small driver interface (PyCUDA today)."""

"""`doctor`'s checks of a policy against a live backend and cluster."""

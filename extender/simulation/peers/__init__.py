"""The load-aware peers from their sources: Trimaran (scheduler-plugins) and Koordinator."""

"""Where node values come from: the query API providers and the background refresher."""

"""Which running pods to move (the plan and its inputs, pure) and the loop that evicts them."""

"""A replay of the user's own Prometheus history: what each scheduler would have done.

collect (the queries of queries.py, folded into facts) -> reconstruct (a History, model.py)
-> driver (each model of models.py, the simulation's pipeline) -> report (and fidelity).
"""

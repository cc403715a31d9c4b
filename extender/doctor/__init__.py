"""`doctor`'s checks of a policy against a live backend and cluster (pure rows) and
`examine`, which gathers their inputs."""

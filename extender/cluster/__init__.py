"""The Kubernetes edge: the API client, watches, leader election, bind, Events, requeue
and overload taints. Every `import kubernetes` and every API call lives here."""

"""Argo CD over its REST API: ``client.ArgoCDClient`` (the ``ports.argocd.ArgoCD`` port) and
``simulator.ArgoCDSimulator`` (an in-memory API server with the same paths, for the demo and
tests).

The client never lets an httpx exception out (``ports.argocd`` errors only), never retries a
sync or rollback whose request may have been applied without first reading the application, and
never records or reports a token or password.
"""

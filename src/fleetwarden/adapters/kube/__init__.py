"""A thin async Kubernetes REST client over httpx: list, watch, get, patch, probe; and the
credentials it presents, static or from a client-go exec credential plugin it runs.

Why not kubernetes_asyncio / lightkube: fleetwarden needs exact control of watch semantics
(resourceVersion resume, bookmarks, relist on 410 Gone) and one transport seam for tests; the
API it uses is small. Transport failures are mapped to the errors of ``ports.kube``, a plugin's
failure to ``CredentialError``; nothing else escapes.
"""

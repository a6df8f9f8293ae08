"""The composition roots: adapters assembled into the app's use cases, for ``serve`` and the
commands.

``service`` builds the pipeline (``app/serving.py``) over its adapters (queue, Kubernetes and
Argo CD clients, Flux, notification sinks, leases, the audit store, Prometheus metrics);
``running`` runs an ASGI app under uvicorn with the service's GC settings; ``service_config``
binds the audit store's SQLite checks into ``app/service_config.py``; ``supervisor`` binds
``app/supervising.py`` into ``adapters/processes.py``; ``workloads`` loads the followed
applications' desired state through ``adapters/workload_sources.py``. The commands that need
several clients have theirs: ``watching`` (``watch``), ``upgrading`` (``upgrade plan | run``),
``auditing`` (``audit``, ``report``), ``deprecations`` (files and helm, or the live
clusters), ``demo`` and ``demo_service`` (the simulated fleet, and the demo's service),
``fleet`` (``fleet`` and ``gate``: inputs read and checked), ``approving`` (``approve``'s
call); ``ingest`` assembles the gateway's ingest path.

It sits between the entry layers (``cli``, ``entrypoints``: arguments, HTTP requests and
responses) and the adapters: it may import adapters, app, ports, formats, core and
presenting (values shown literally, the watch sinks), never an entry layer. It holds no
decision (``app``/``core``) and no HTTP route (``entrypoints``).
"""

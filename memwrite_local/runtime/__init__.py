"""The local runtime: the real handlers driven in-process, on SQLite (the embedded default) or
moto.

`backend` (what every backend does), `embedded` (one SQLite file under a data directory) and
`aws` (moto) set the handlers' environment; `runner` plays API Gateway, SQS and Step Functions
for them; `pipeline` runs one conversation through it all; `server` is `memwrite serve`'s HTTP
server and its workers (the queue, the webhook deliveries); `funnel` counts a run's rejections
from its spans.
"""

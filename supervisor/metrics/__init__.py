"""What a host tells its operators: Prometheus metrics and `/healthz`, served on
`run --metrics-address`.

`registry` defines the metrics a host records as it works, `queue_depth` the one read from the
database when scraped, `health` what `/healthz` answers, and `server` the small HTTP server that
serves both from a thread of the parent.
"""

"""A build's end told to a webhook, in a `notify` job's child.

- `post`: the job's handler: POSTs the request the parent made, and says whether a retry
  could help when the webhook does not take it.
"""

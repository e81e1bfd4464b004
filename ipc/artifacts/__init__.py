"""Where a build's files live: a folder or an S3-compatible bucket, behind one interface."""

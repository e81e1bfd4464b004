"""The wire between the parent and its children: message types (`messages`) and framing (`framing`)."""

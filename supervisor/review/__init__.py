"""Reviews: people accepting or rejecting a build's changes, and what follows from it."""

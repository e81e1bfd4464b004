// Text of the "branch" variant: the card's copy was rewritten.
export const cardText =
  'Each story renders in headless Chromium, and any pixel that moved is flagged for review.';

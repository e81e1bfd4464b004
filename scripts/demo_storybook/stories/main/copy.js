// Text of the "main" variant that the branch edits.
export const cardText =
  'Every story is rendered in a real browser and compared with the approved baseline.';

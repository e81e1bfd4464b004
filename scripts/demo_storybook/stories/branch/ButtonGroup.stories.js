// A story that only the branch variant has: new on the branch.
import { createButton, row } from '../shared/components.js';

export default {
  title: 'Demo/Button Group',
};

export const Actions = {
  render: () =>
    row(
      createButton({ label: 'Publish', variant: 'primary' }),
      createButton({ label: 'Preview', variant: 'secondary' }),
      createButton({ label: 'Discard', variant: 'ghost' }),
    ),
};

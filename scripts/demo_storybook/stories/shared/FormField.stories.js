// A labelled input with help text: the same on both variants.
import { createField } from './components.js';

export default {
  title: 'Demo/Form Field',
  render: (args) => createField(args),
};

export const Email = {
  args: {
    label: 'Email address',
    type: 'email',
    value: 'ada@example.com',
    help: 'We only use it to send build reports.',
  },
};

// Buttons. The primary one takes its colour from --color-primary, which the branch changes.
import { createButton } from './components.js';

export default {
  title: 'Demo/Button',
  render: (args) => createButton(args),
};

export const Primary = { args: { variant: 'primary', label: 'Save changes' } };

export const Secondary = { args: { variant: 'secondary', label: 'Cancel' } };

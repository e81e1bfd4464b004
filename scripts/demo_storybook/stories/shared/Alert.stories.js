// An informational alert, accented with --color-primary (changed on the branch).
import { createAlert } from './components.js';

export default {
  title: 'Demo/Alert',
  render: (args) => createAlert(args),
};

export const Info = {
  args: {
    tone: 'info',
    title: 'A new baseline is ready',
    text: 'Approve the build on main to make these snapshots the baseline.',
  },
};

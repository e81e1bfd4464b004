// Status badges: no primary colour, so the same on both variants.
import { createBadge, row } from './components.js';

export default {
  title: 'Demo/Badge',
};

export const Statuses = {
  render: () =>
    row(
      createBadge({ label: 'Draft' }),
      createBadge({ label: 'Published', tone: 'success' }),
      createBadge({ label: 'Review', tone: 'warning' }),
      createBadge({ label: 'Archived', tone: 'danger' }),
    ),
};

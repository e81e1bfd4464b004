// A toast that only the main variant has: the branch removes this story.
import { createToast } from '../shared/components.js';

export default {
  title: 'Demo/Toast',
  render: (args) => createToast(args),
};

export const Saved = { args: { text: 'Changes saved' } };

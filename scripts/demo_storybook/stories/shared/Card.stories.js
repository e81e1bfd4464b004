// A card whose copy comes from the variant (stories/<variant>/copy.js): the branch rewrites it.
import { cardText } from 'demo-variant/copy.js';
import { createCard } from './components.js';

export default {
  title: 'Demo/Card',
  render: (args) => createCard(args),
};

export const Article = {
  args: { eyebrow: 'Guide', title: 'Visual review, story by story', text: cardText },
};

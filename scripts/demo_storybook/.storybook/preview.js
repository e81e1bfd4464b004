// The variant's design tokens (stories/main/tokens.css or stories/branch/tokens.css), then the
// components' styles, which read only the tokens.
import 'demo-variant/tokens.css';
import '../stories/shared/components.css';

/** @type { import('@storybook/html').Preview } */
const preview = {
  parameters: {
    layout: 'padded',
  },
};

export default preview;

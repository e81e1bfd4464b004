/** Storybook 10 (ESM-only config); no addons, so the index holds stories only. */
const config = {
  framework: { name: '@storybook/react-vite', options: {} },
  stories: ['../stories/**/*.stories.@(js|jsx)'],
  addons: [],
  core: { disableTelemetry: true },
};
export default config;

// The demo's Storybook: html renderer on Vite, no addons, no telemetry, public/ served at the
// root. DEMO_VARIANT picks the variant: "main" (the default) or "branch". Stories in
// stories/shared/ are in both; stories/<variant>/ adds that variant's own stories and is what
// `import ... from 'demo-variant/...'` resolves to (its design tokens and copy).
import { fileURLToPath } from 'node:url';
import { mergeConfig } from 'vite';

const VARIANTS = ['main', 'branch'];
const variant = process.env.DEMO_VARIANT || 'main';
if (!VARIANTS.includes(variant)) {
  throw new Error(`DEMO_VARIANT must be one of ${VARIANTS.join(', ')}, not ${variant}`);
}

/** @type { import('@storybook/html-vite').StorybookConfig } */
const config = {
  framework: { name: '@storybook/html-vite', options: {} },
  stories: ['../stories/shared/*.stories.js', `../stories/${variant}/*.stories.js`],
  addons: [],
  staticDirs: ['../public'],
  core: { disableTelemetry: true },
  viteFinal: (viteConfig) =>
    mergeConfig(viteConfig, {
      resolve: {
        alias: { 'demo-variant': fileURLToPath(new URL(`../stories/${variant}`, import.meta.url)) },
      },
      build: {
        rollupOptions: {
          output: {
            // Storybook's own code in one chunk of its own, byte-identical in both variants, so
            // the artifacts store it once.
            manualChunks: (id) => (id.includes('/node_modules/') ? 'vendor' : undefined),
          },
        },
      },
    }),
};

export default config;

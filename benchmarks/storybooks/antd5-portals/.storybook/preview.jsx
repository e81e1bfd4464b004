import React from 'react';
import { ConfigProvider } from 'antd';

// Every story inside antd's ConfigProvider (CSS-in-JS: antd's styles are injected at render).
// The click wave is off, as a team capturing screenshots would set it.
const withAntd = (Story) => (
  <ConfigProvider wave={{ disabled: true }}>
    <div style={{ padding: 16 }}>
      <Story />
    </div>
  </ConfigProvider>
);

export default {
  decorators: [withAntd],
  parameters: { layout: 'fullscreen', controls: { disable: true } },
};

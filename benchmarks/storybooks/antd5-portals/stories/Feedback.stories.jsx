import React from 'react';
import { Alert, Button, Progress, Result, Space, message, notification } from 'antd';

// antd's static message and notification render into portals on <body>, outside #storybook-root.
export default { title: 'Feedback/Messages' };

const Bar = () => <Space><Button>Cancel</Button><Button type="primary">Save</Button></Space>;

export const MessageSuccess = { render: () => <Bar />, play: async () => { message.success('Saved'); } };
export const MessageError = { render: () => <Bar />, play: async () => { message.error('Could not save: quota reached'); } };
export const MessageStack = {
  render: () => <Bar />,
  play: async () => {
    message.info('Syncing 3 files');
    message.warning('One file is larger than 10 MB');
    message.success('2 files synced');
  },
};
export const NotificationInfo = {
  render: () => <Bar />,
  play: async () => { notification.info({ message: 'Export ready', description: 'orders-march.csv (4 rows).', placement: 'topRight' }); },
};
export const NotificationBottomLeft = {
  render: () => <Bar />,
  play: async () => {
    notification.warning({ message: 'Storage almost full', description: '92 GB of 100 GB used.', placement: 'bottomLeft' });
  },
};
export const Alerts = {
  render: () => (
    <Space direction="vertical" style={{ width: 520 }}>
      <Alert type="success" message="Deployed v2.4.0" showIcon />
      <Alert type="info" message="Maintenance on Sunday" description="From 02:00 to 04:00 UTC." showIcon />
      <Alert type="warning" message="Your trial ends in 3 days" showIcon closable />
      <Alert type="error" message="Build failed" description="3 stories threw." showIcon />
    </Space>
  ),
};
export const Results = {
  render: () => <Result status="success" title="Order #1042 placed" subTitle="It ships in 2 days." extra={<Button type="primary">Track</Button>} />,
};
export const Progresses = {
  render: () => (
    <Space direction="vertical" style={{ width: 420 }}>
      <Progress percent={30} />
      <Progress percent={70} status="exception" />
      <Progress percent={100} />
      <Space><Progress type="circle" percent={75} /><Progress type="dashboard" percent={42} /></Space>
    </Space>
  ),
};

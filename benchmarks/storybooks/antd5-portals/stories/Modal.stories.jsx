import React from 'react';
import { Button, Form, Input, Modal, Select, Space, Typography } from 'antd';
import { cities } from './data.js';

export default { title: 'Overlays/Modal' };

const Page = () => <Typography.Paragraph>The page behind the dialog.</Typography.Paragraph>;

export const Basic = {
  render: () => (<><Page /><Modal open title="Archive project" onOk={() => {}} onCancel={() => {}}><p>Archived projects are read-only.</p></Modal></>),
};

export const Centered = {
  render: () => (<><Page /><Modal open centered title="Centered" footer={null}><p>No footer, centred on the viewport.</p></Modal></>),
};

export const WithForm = {
  render: () => (
    <><Page />
      <Modal open title="Invite a member" okText="Invite">
        <Form layout="vertical" initialValues={{ email: 'otto@example.com', city: 'bremen' }}>
          <Form.Item label="E-mail" name="email" rules={[{ required: true }]}><Input /></Form.Item>
          <Form.Item label="City" name="city"><Select options={cities} /></Form.Item>
          <Form.Item label="Note" name="note"><Input.TextArea rows={3} /></Form.Item>
        </Form>
      </Modal>
    </>
  ),
};

export const LongContent = {
  render: () => (
    <Modal open title="Terms">
      {Array.from({ length: 30 }, (_, i) => <p key={i}>Clause {i + 1}: the parties agree to the terms of section {i + 2}.</p>)}
    </Modal>
  ),
};

export const Wide = {
  render: () => (<Modal open width={900} title="Wide dialog" okButtonProps={{ danger: true }} okText="Delete"><p>900 px wide, with a danger button.</p></Modal>),
};

export const Nested = {
  render: () => (
    <>
      <Modal open title="Outer" width={700}><p>The outer dialog.</p></Modal>
      <Modal open title="Inner" width={400} zIndex={1100}><p>A second dialog above the first.</p></Modal>
    </>
  ),
};

export const ConfirmFromPlay = {
  render: () => <Button danger>Delete</Button>,
  play: async () => {
    Modal.confirm({ title: 'Delete 3 files?', content: 'This cannot be undone.', okText: 'Delete', okType: 'danger' });
  },
};

export const InfoFromPlay = {
  render: () => <Space><Button>Help</Button></Space>,
  play: async () => {
    Modal.info({ title: 'Shortcuts', content: <ul><li>g then p: projects</li><li>?: this help</li></ul> });
  },
};

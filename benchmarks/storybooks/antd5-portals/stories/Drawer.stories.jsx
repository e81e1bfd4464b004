import React from 'react';
import { Button, DatePicker, Drawer, Form, Input, Select, Space } from 'antd';
import { cities, day } from './data.js';

export default { title: 'Overlays/Drawer' };

const Body = () => (<><p>Project settings</p><p>Members: 12</p><p>Plan: Team</p></>);

export const Right = { render: () => <Drawer open title="Details" placement="right"><Body /></Drawer> };
export const Left = { render: () => <Drawer open title="Navigation" placement="left" width={280}><Body /></Drawer> };
export const Top = { render: () => <Drawer open title="Filters" placement="top" height={220}><Body /></Drawer> };
export const Bottom = { render: () => <Drawer open title="Log" placement="bottom" height={200}><Body /></Drawer> };

export const WithForm = {
  render: () => (
    <Drawer open title="New release" width={520}
      extra={<Space><Button>Cancel</Button><Button type="primary">Save</Button></Space>}>
      <Form layout="vertical" initialValues={{ name: 'v2.4.0', city: 'porto', date: day }}>
        <Form.Item label="Name" name="name"><Input /></Form.Item>
        <Form.Item label="Region" name="city"><Select options={cities} /></Form.Item>
        <Form.Item label="Date" name="date"><DatePicker /></Form.Item>
        <Form.Item label="Notes" name="notes"><Input.TextArea rows={4} /></Form.Item>
      </Form>
    </Drawer>
  ),
};

export const Nested = {
  render: () => (
    <Drawer open title="Level one" width={600}>
      <p>First level.</p>
      <Drawer open title="Level two" width={320}><p>Second level.</p></Drawer>
    </Drawer>
  ),
};

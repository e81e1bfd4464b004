import React from 'react';
import {
  Button, Checkbox, DatePicker, Form, Input, InputNumber, Radio, Rate, Select, Slider, Space, Switch, Upload,
} from 'antd';
import { UploadOutlined } from '@ant-design/icons';
import { cities, day } from './data.js';

export default { title: 'Data/Form' };

export const Login = {
  render: () => (
    <Form style={{ maxWidth: 360 }} initialValues={{ remember: true, user: 'mara' }} layout="vertical">
      <Form.Item label="Username" name="user" rules={[{ required: true }]}><Input /></Form.Item>
      <Form.Item label="Password" name="password" rules={[{ required: true }]}><Input.Password /></Form.Item>
      <Form.Item name="remember" valuePropName="checked"><Checkbox>Remember me</Checkbox></Form.Item>
      <Button type="primary" block>Sign in</Button>
    </Form>
  ),
};

function Validated() {
  const [form] = Form.useForm();
  React.useEffect(() => { form.validateFields().catch(() => {}); }, [form]);
  return (
    <Form form={form} style={{ maxWidth: 420 }} layout="vertical" initialValues={{ email: 'not-an-email' }}>
      <Form.Item label="E-mail" name="email" rules={[{ type: 'email', message: 'Not a valid e-mail' }]}><Input /></Form.Item>
      <Form.Item label="Name" name="name" rules={[{ required: true, message: 'Name is required' }]}><Input /></Form.Item>
      <Form.Item label="City" name="city" rules={[{ required: true, message: 'Pick a city' }]}><Select options={cities} /></Form.Item>
    </Form>
  );
}
export const ValidationErrors = { render: () => <Validated /> };

export const Horizontal = {
  render: () => (
    <Form labelCol={{ span: 6 }} wrapperCol={{ span: 14 }} style={{ maxWidth: 640 }}
      initialValues={{ plan: 'team', seats: 12, city: 'turin', start: day, notify: true, rating: 4, budget: 40 }}>
      <Form.Item label="Plan" name="plan"><Radio.Group options={['free', 'team', 'enterprise']} optionType="button" /></Form.Item>
      <Form.Item label="Seats" name="seats"><InputNumber min={1} /></Form.Item>
      <Form.Item label="City" name="city"><Select options={cities} /></Form.Item>
      <Form.Item label="Start" name="start"><DatePicker /></Form.Item>
      <Form.Item label="Notify" name="notify" valuePropName="checked"><Switch /></Form.Item>
      <Form.Item label="Rating" name="rating"><Rate /></Form.Item>
      <Form.Item label="Budget" name="budget"><Slider /></Form.Item>
    </Form>
  ),
};
export const Inline = {
  render: () => (
    <Form layout="inline">
      <Form.Item label="Search"><Input placeholder="Name or e-mail" /></Form.Item>
      <Form.Item label="Role"><Select style={{ width: 140 }} defaultValue="editor" options={[{ value: 'admin' }, { value: 'editor' }, { value: 'viewer' }]} /></Form.Item>
      <Form.Item><Button type="primary">Filter</Button></Form.Item>
    </Form>
  ),
};
export const Disabled = {
  render: () => (
    <Form disabled layout="vertical" style={{ maxWidth: 360 }} initialValues={{ name: 'Otto Brandt', city: 'bremen' }}>
      <Form.Item label="Name" name="name"><Input /></Form.Item>
      <Form.Item label="City" name="city"><Select options={cities} /></Form.Item>
      <Form.Item label="Agree"><Checkbox checked>I agree</Checkbox></Form.Item>
      <Button type="primary">Save</Button>
    </Form>
  ),
};
export const Sizes = {
  render: () => (
    <Space direction="vertical">
      {['small', 'middle', 'large'].map((s) => (
        <Space key={s}><Input size={s} defaultValue={s} style={{ width: 160 }} /><Button size={s}>{s}</Button><InputNumber size={s} defaultValue={3} /></Space>
      ))}
    </Space>
  ),
};
export const UploadList = {
  render: () => (
    <Upload defaultFileList={[
      { uid: '1', name: 'orders-march.csv', status: 'done' },
      { uid: '2', name: 'invoice-1042.pdf', status: 'error' },
      { uid: '3', name: 'logo.svg', status: 'uploading', percent: 40 },
    ]}>
      <Button icon={<UploadOutlined />}>Upload</Button>
    </Upload>
  ),
};
export const Inputs = {
  render: () => (
    <Space direction="vertical" style={{ width: 360 }}>
      <Input addonBefore="https://" addonAfter=".com" defaultValue="storyshelf" />
      <Input.Search defaultValue="invoices" enterButton />
      <Input.TextArea showCount maxLength={100} defaultValue="Quarterly report" />
      <Input.OTP defaultValue="204" length={6} />
    </Space>
  ),
};
